"""socialsim.metrics"""

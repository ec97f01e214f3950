"""socialsim.batch"""

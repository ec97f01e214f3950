"""socialsim.scenarios"""

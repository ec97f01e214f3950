"""socialsim.spaces"""

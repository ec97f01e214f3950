"""socialsim.model"""

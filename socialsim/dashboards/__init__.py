"""socialsim.dashboards"""

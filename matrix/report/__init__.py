"""promptgrid.matrix.report"""

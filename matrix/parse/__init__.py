"""promptgrid.matrix.parse"""

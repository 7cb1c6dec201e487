"""promptgrid.matrix.datasets"""

"""promptgrid.matrix.clients"""

"""Live clusters as the fleet placer plans on: node inventory, what placer already placed
there and still promises, and the workload definitions registered in a cluster.
"""

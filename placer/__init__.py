"""placer: gang-aware multi-cluster placement of GPU AI workloads on Kubernetes."""

__version__ = "0.1.0"

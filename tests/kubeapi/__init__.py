"""A Kubernetes API server for tests: several independent clusters on 127.0.0.1 ports."""
from .builders import bound_pod, catalog_crds, crd, custom_object, gpu_node, loaded_node, namespace, synthetic_cluster
from .server import ApiFleet, ApiServer, Faults, RequestLog, start_fleet, write_kubeconfig
from .store import ApiError, Store

__all__ = ["ApiError", "ApiFleet", "ApiServer", "Faults", "RequestLog", "Store", "bound_pod", "catalog_crds",
           "crd", "custom_object", "gpu_node", "loaded_node", "namespace", "start_fleet", "synthetic_cluster",
           "write_kubeconfig"]

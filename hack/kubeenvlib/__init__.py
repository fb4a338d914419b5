"""The parts of hack/kube-env (a stdlib-only script) that are not its verbs."""

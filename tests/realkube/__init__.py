"""Real Kubernetes in the loop: the scheduler-fidelity judge.

`env` starts control planes through `hack/kube-env` and talks to them with the
kubernetes client (not through placer); `cluster` registers nodes, binds pods and cleans
up; `pods` creates the pods a placed workload's controllers would create; `scenario`
asks placer for its verdict and the real kube-scheduler for its binding, and compares.
Shared by the `kube`-marked tests and `benchmarks/fidelity.py`.
"""

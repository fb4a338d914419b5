"""Every label, annotation and finalizer placer reads or writes: one place, so that a
workload placed by `submit` is recognised by the daemon and by `plan`, and back."""

# Policy a user sets on a workload
ANN_PIN = "placer.dev/cluster"                    # pin: the user's request; placer never writes it
ANN_SELECTOR = "placer.dev/cluster-selector"      # label selector over cluster labels
ANN_PRIORITY = "placer.dev/priority"              # integer, default 0
ANN_CLUSTER_ORDER = "placer.dev/cluster-order"   # "a,b,c": fill a, then b, then c, then the rest
ANN_GROUP = "placer.dev/group"                    # objects sharing it are placed together
ANN_RESCHEDULE = "placer.dev/reschedule"          # "true": re-place when its pods stay Pending
ANN_SPREAD = "placer.dev/spread"                  # duplicate | divide (placer.model.spread)
ANN_SPREAD_CLUSTERS = "placer.dev/spread-clusters"          # duplicate: exactly N; divide: at most N
ANN_SPREAD_WEIGHTS = "placer.dev/spread-weights"            # divide: "east=2,west=1"
ANN_SPREAD_MIN_REPLICAS = "placer.dev/spread-min-replicas"  # divide: place only if at least M land

# What placer writes on the objects it creates
MANAGED = "placer.dev/managed"                    # label, "true" on everything placer creates
WORKLOAD = "placer.dev/workload"                  # label: hash of the workload key; annotation: the key
GROUP = ANN_GROUP                                 # label: hash of the group key; annotation: the key
ORIGIN = "placer.dev/origin"                      # annotation: file path, or hub/<ns>/<Kind>/<name>
PLAN = "placer.dev/plan"                          # annotation: id of the plan that placed it
PLACED_CLUSTER = "placer.dev/placed-cluster"      # annotation (and label): the cluster placer chose
SHARED = "placer.dev/shared"                      # annotation: a companion several groups bring along

# What the daemon writes on staging objects
FINALIZER = "placer.dev/cleanup"
ANN_PHASE = "placer.dev/phase"
ANN_MESSAGE = "placer.dev/message"
ANN_SOURCE_GENERATION = "placer.dev/source-generation"
# a spread workload (placer.dev/spread): its clusters, "a,b,c" (duplicate) or "a=7,b=5" (divide
# replicas), in place of PLACED_CLUSTER; and its copies one by one (JSON: cluster, replicas, ready, phase)
PLACED_SHARES = "placer.dev/placed-shares"
SHARES_STATUS = "placer.dev/shares-status"

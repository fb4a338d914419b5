"""The nouns of placer, pure: the one identity (`WorkloadRef`), workloads, the fleet, plans,
reasons, topology levels, quantities, label selectors, names and errors.

Every other package builds on these frozen values; this one imports nothing else of placer's.
"""

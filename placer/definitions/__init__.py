"""Workload definitions and their interpretation, pure: placer's definition schema, the fused
jq program, the catalog and its sources, object + definition -> `Workload`, pod-template
rewriting, topology requests and the `describe` views.
"""

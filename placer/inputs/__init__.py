"""What a user hands placer: manifests from files or stdin, placement groups, priorities, the
clusters file, and which clusters a command targets.
"""

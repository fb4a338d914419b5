"""One use case per command (plan, submit, get, delete, describe, preview, options), each
callable from the library API; the CLI parses, calls one of these, and renders.
"""

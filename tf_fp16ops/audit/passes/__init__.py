"""Analysis passes: pure functions of (audit graph, call site, runtime context). They never
print."""

"""Named sub-agents (seed 004): definitions as immutable generations, the delegation
graph, runs as rows, background runs delivered through a durable inbox, signals,
cancellation, recovery and authorization. The kernel runs a sub-agent's frame; this
package decides whether it may run, records it, and delivers what it returns."""

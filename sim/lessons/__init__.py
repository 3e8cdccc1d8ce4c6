"""The models behind the concept pages: one idea each, built on the simulation core (sim).

They run the core's scheduler and read its Traces; the core never imports them.

- lesson: the "Batching and Scheduling" lesson's printed figures, example by example.
- sweeps: Why batch, static vs continuous batching, chunked prefill (Examples 1 to 5).
- starvation: policies on a one-at-a-time server, and aging (Example 6).
- admission: admission control and Little's law as a scheduler run (Example 7).
- queueing: the arrival sources of those runs, drawn as the lesson's Java program draws them.
- javarandom: a port of java.util.Random, which queueing draws from.
- fairness: tenants under FCFS, round-robin, a cap and VTC; the service gap (Example 9).
- disagg: disaggregated prefill and decode: KV transfer against prefill time (Example 10).
"""

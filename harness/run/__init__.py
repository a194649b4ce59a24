"""The run layer: one run, start to verdict. The runner (phases, parts and
their undo), the interpreter (client processes), the op generator, the
final phase's recovery, and what a running test shows (progress). Above
the ground (the history contract, options, nodes, the store) and the
brokers, faults and checkers; below the commands."""

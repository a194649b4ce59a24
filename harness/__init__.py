"""Control plane: CLI, nodes, DB lifecycles, the history writer, the store."""

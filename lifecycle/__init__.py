"""What the operator decides for each object it reconciles — the phase, the conditions, the status fields, the
events, which children to prune, whether a baseline held in status can be trusted — as pure functions of what the
cluster holds. The controllers in reconciler/ only read, call these, and write."""

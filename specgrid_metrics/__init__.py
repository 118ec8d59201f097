"""The metric definitions the load generator and the analysis share (request timings and the cell
summary, accept length, counter increases). Pure; imports nothing of the project, so every
layer above may use it."""

"""Loop recovery: a Loop over time whose body computes an RNN/GRU/LSTM cell becomes that node.
The body is evaluated abstractly (values.py: what is known of each tensor; cells.py: the walk and
the gate patterns; body_class.py: the class of bodies a probe can prove), each candidate cell is
checked against the body with the family's float64 reference cell (check.py), and the Loop is
rewritten, or left for unrolling (rewrite.py; noop_slice.py: the Slices it may look through;
enclosing.py: what a body may ask of the graph holding it)."""

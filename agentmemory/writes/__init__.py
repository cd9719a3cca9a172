"""The writes of the fold's records outside the append path, in one place: storing a
fold's summary (`summaries`), retiring summaries and latching their spans (`retire`),
and tamper reports (`tampering`). The recall pipeline and the window read; they call
these to write."""

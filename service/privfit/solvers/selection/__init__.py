"""Private model selection: ``auto``, which fits a public set of candidate configurations on a secret training
split, scores them privately on the held-out rows and releases the best (:mod:`.auto`)."""

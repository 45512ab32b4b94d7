"""DP online-to-batch with tree aggregation (Zhang, Tran & Cutkosky 2022, Algorithm 1): the solver ``dp_otb``
(:mod:`.solver`), its online learners (:mod:`.learners`), the tree-aggregation noise (:mod:`.tree_aggregation`) and the
compiled one-pass loop (:mod:`.kernel`)."""

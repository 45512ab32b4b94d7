"""DP distributed online learning (Li, Zhou, Chen & Jiang; Algorithms 1 and 2 with the spec's privacy fixes): the
solver ``dp_distributed`` (:mod:`.solver`) and the public gossip matrices (:mod:`.mixing`)."""

"""ReSQue private stochastic convex optimisation (Carmon et al. 2023): the estimator and the non-smooth GLM losses
(:mod:`.estimator`), the practical solver ``resque_dpsgd`` (:mod:`.dpsgd`) and the paper's own private ERM
``resque_localized`` (:mod:`.localized`, on :mod:`.localized_core`)."""

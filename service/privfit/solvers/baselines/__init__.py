"""The baselines users would otherwise pick: DP gradient descent (:mod:`.dp_gd`), DP-SGD (:mod:`.dp_sgd`), output and
objective perturbation (:mod:`.output_perturbation`, :mod:`.objective_perturbation`) on the certified regularised
minimiser (:mod:`.erm`) and their shared noise and defaults (:mod:`.perturbation`)."""

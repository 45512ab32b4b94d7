"""Private lazy online convex optimisation (P-COMW; Agarwal, Kale, Singh & Thakurta): the solver ``dp_lazy_oco``
(:mod:`.solver`), the P-COMW-TG loop (:mod:`.pcomw`), the exact truncated-Gaussian sampler (:mod:`.sampling`) and the
paper's accountant (:mod:`.accounting`)."""

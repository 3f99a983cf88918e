"""``rlgate demo``: the refund story end to end on the shipped tiny policy (:mod:`.story`),
and the same story across training seeds (:mod:`.recipe`)."""

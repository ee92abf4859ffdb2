;; hugetable: a table of 100 million elements.
(module (table 100000000 funcref))

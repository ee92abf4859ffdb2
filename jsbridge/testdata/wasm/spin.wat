;; spin: an endless loop (the deadline must stop it).
(module
  (func (export "spin") (loop $l (br $l))))

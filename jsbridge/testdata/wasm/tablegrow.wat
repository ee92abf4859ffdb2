;; tablegrow: a table without a maximum, grown by JS's argument.
(module
  (table 1 funcref)
  (func (export "grow") (param i32) (result i32)
    (table.grow 0 (ref.null func) (local.get 0))))

"""Back-ends, one module each, behind one streaming interface (see base.Provider)."""

"""adass: distributed machine learning with adaptive sample selection (ADASS-DML, Q-ADASS, RS-ADASS)."""

__version__ = "0.1.0"

__all__ = ["__version__"]

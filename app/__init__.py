"""steer: real-time pair programming with a language model, in the terminal."""

__version__ = "0.1.0"

"""The demo repository and answers behind `make screenshots`, the snapshot tests and the
key-flow tests: a small calculator and what a model answers when asked for type hints."""

CALC = '''"""A tiny calculator."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def main():
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))


if __name__ == "__main__":
    main()
'''

# A model's answer to "add type hints" for CALC: three search/replace blocks.
CALC_ANSWER = '''I'll add type hints and guard against division by zero.

calc.py
```python
<<<<<<< SEARCH
def add(a, b):
    return a + b
=======
def add(a: float, b: float) -> float:
    return a + b
>>>>>>> REPLACE
```

calc.py
```python
<<<<<<< SEARCH
def div(a, b):
    return a / b
=======
def div(a: float, b: float) -> float:
    if b == 0:
        raise ZeroDivisionError("b must not be zero")
    return a / b
>>>>>>> REPLACE
```

calc.py
```python
<<<<<<< SEARCH
def main():
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))
=======
def main() -> None:
    print(add(1, 2), sub(3, 1), mul(2, 3), div(8, 2))
>>>>>>> REPLACE
```

The division now fails loudly instead of returning inf.
'''

# What a second answer (after a redirect or a follow-up) says.
SUB_ANSWER = '''Now sub, as asked.

calc.py
```python
<<<<<<< SEARCH
def sub(a, b):
    return a - b
=======
def sub(a: float, b: float) -> float:
    return a - b
>>>>>>> REPLACE
```
'''

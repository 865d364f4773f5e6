# Puts the project root on sys.path so the tests import the package in place.

def test_x():
    import sys

    import dpflow
    assert dpflow.__file__ is not None, (dpflow.__path__, sys.path)

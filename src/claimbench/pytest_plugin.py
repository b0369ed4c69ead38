"""pytest plugin: claims as test items (filled in by the CI issue); inert without --claims."""


def pytest_addoption(parser):
    group = parser.getgroup("claimbench")
    group.addoption("--claims", action="append", default=None, metavar="PATH",
                    help="collect claim files under PATH as test items")

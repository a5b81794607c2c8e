"""Build of tylo's one optional C extension, ``tylo._launch`` (the inline launch path;
see tylo/_launch.c and tylo/_launch_module.c). Everything else is in pyproject.toml. If
the extension cannot be built (no C compiler or no Python headers), the install still
succeeds and tylo uses the same path written in Python: ``python -c "import
tylo.kernel.fastpath as f; print(f.ACCELERATED)"`` says which one is in use."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tylo._launch",
            ["tylo/_launch.c", "tylo/_launch_module.c"],
            depends=["tylo/_launch.h"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)

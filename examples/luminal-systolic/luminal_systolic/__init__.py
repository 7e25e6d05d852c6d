"""luminal-systolic: the reference backend plugin for luminal (docs/plugins.md).

It targets SA-128, a simulated accelerator with a 128x128 weight-stationary systolic
array, a vector unit and a DMA engine, found on the PCI bus by fake ids.  The modules
follow a plugin's natural layers:

    isa         the instruction stream (load, matmul tile, activation, store) and its
                binary encoding
    lower       luminal's schedule -> instructions (+ the constants the program reads)
    simulator   runs a program on the CPU with numpy and estimates its cycles
    backend     the `luminal.backends` entry point: discover, compile, load, run, time
"""

__version__ = "0.1.0"

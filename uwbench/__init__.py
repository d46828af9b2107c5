"""uwbench: a benchmarking and hyperparameter-sweep harness for memory-augmented neural networks and
the writing strategies of Le, Tran & Venkatesh, "Learning to Remember More with Less Memorization"
(ICLR 2019): regular writing, Uniform Writing (UW), Cached Uniform Writing (CUW) and random writing."""

__version__ = "0.1.0"

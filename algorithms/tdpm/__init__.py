"""The temporal DP mixture (Ahmed & Xing 2008): chain dynamics, emissions, the Gibbs
sampler and the fitted model."""

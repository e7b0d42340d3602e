"""The figures of a run: its forecasts beside the baselines' (``forecast.png``) and its
loss curves (``loss.png``), with the shared colours and axes the backtest and tuning use.
matplotlib is imported only when a figure is drawn."""

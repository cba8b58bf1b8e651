INPUTS: list = []

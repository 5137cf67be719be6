print("steno")

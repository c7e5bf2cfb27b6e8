print("rtm")
